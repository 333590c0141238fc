"""Containment of a test run (issue "A build is never wrong", the
emulator's part): a kernel's forked child never outlives the run, a
killed or interrupted emulator leaves nothing running, the memory limit is
a named fault and is checked before anything is allocated, a kernel that
writes to every file descriptor reaches nothing of the model, one that
writes escape sequences cannot fake a PASS on the terminal, and an I/O
error on the results names the path and the errno and leaves no temporary
file; and expected values an integer output cannot hold fail the vector.

The kernels are kernels/broken/hostile.cpp (``broken_hostile``), built
in the session's project copy; each mode of the zygote's sandbox
(``sandbox.c``: the zygote as PID 1 of a PID namespace, of one inside a
user namespace, or only process groups and subreapers) is forced in turn
through ``GPSIMD_EMU_CONTAIN`` where the machine allows it. (What a kernel
can reach inside it: test_emu_sandbox.py.)
"""
import json
import os
import pathlib
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from conftest import ROOT, copy_built, fill, run_scons
from test_emu_checks import BROKEN_OPTIONS

LIB = "broken_hostile"
NAMES = ("gpsimd-sleeper", "gpsimd-spinner", "gpsimd-zygote", "gpsimd-vector", "gpsimd-core")
#: The emulator server's processes live as long as their build: counted only
#: in the session of the scons a test started (another build on the machine
#: has its own server), so ``_ours(session=...)``.
SERVER_NAMES = ("gpsimd-server", "gpsimd-run")
MODES = ("pidns", "userns", "pgroup")
ZYGOTE = "build/host/emu/gpsimd-zygote"


#: The project the tests run in: ``_ours`` counts only processes working in
#: it (another build or test suite on the machine has processes of the same
#: names, and its idle emulator server keeps a zygote for as long as it runs).
_PROJECT: list = []


@pytest.fixture(scope="module")
def hostile(built_project, tmp_path_factory):
    """(project, plan path) with broken_hostile's objects and plan built, in
    this module's copy of the shared build."""
    proj = copy_built(built_project[0], tmp_path_factory.mktemp("hostile") / "p")
    _PROJECT[:] = [os.path.realpath(proj)]
    out = f"build/host/{LIB}"
    proc = run_scons(proj, *BROKEN_OPTIONS, f"{out}/testplan.json", f"{out}/locations.json",
                     f"{out}/{LIB}.packed.so", ZYGOTE)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proj, f"{out}/testplan.json"


def _ours(session=None):
    """{pid: name} of the processes a test run names (contain.set_name and
    the hostile kernel's prctl); with ``session``, the emulator server's
    too, of that session only."""
    found = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/comm") as f:
                name = f.read().strip()
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] == "Z" or not _in_project(pid):
            continue
        if name in NAMES or (session is not None and name in SERVER_NAMES
                             and int(fields[3]) == session):
            found[int(pid)] = name
    return found


def _in_project(pid) -> bool:
    """Does process ``pid`` work in the tests' project, or run its
    program (a vector's processes are forks of the project's zygote, whose
    working directory is private), or is it unknown (no project yet, or a
    process this one cannot read)?"""
    if not _PROJECT:
        return True
    try:
        cwd = os.readlink(f"/proc/{pid}/cwd")
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            program = f.read().split(b"\0")[0].decode("utf-8", "replace")
    except OSError:
        return True
    return any(p == _PROJECT[0] or p.startswith(_PROJECT[0] + os.sep) for p in (cwd, program))


def _left_over(before, wait=3.0, session=None):
    """Processes named like ours that were not there ``before``, after
    giving the kernel ``wait`` seconds to deliver the last kills
    (``session``: as ``_ours``)."""
    deadline = time.monotonic() + wait
    while True:
        left = {p: n for p, n in _ours(session).items() if p not in before}
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.05)


def _plan_with(proj, path, ops, tmp_path, **vector_changes):
    """A copy of the plan keeping ``ops`` (one vector each), vectors changed."""
    doc = json.loads((proj / path).read_text())
    doc["ops"] = [o for o in doc["ops"] if o["name"] in ops]
    for o in doc["ops"]:
        for v in o["vectors"]:
            v.update(vector_changes)
    for c in doc["cores"]:
        c["object"] = str(proj / c["object"])
    out = tmp_path / "plan.json"
    out.write_text(json.dumps(doc))
    return out


def _cli(plan, *args):
    return [sys.executable, "-m", "gpsimd_emu", "run", str(plan),
            "--zygote", str(pathlib.Path(_PROJECT[0]) / ZYGOTE), *args]


def _env(mode=None):
    env = dict(os.environ, PYTHONPATH=str(ROOT / "runtime_model"))
    if mode:
        env["GPSIMD_EMU_CONTAIN"] = mode
    return env


def _mode_works(mode):
    """Can this machine make the namespace mode (a throwaway process tries
    the ``unshare`` the zygote makes)?"""
    flags = {"pidns": 0x20000000, "userns": 0x30000000, "pgroup": 0}[mode]
    code = ("import ctypes, sys; sys.exit(ctypes.CDLL(None, use_errno=True).unshare(%d) != 0)"
            % flags)
    return subprocess.run([sys.executable, "-c", code]).returncode == 0


@pytest.mark.parametrize("mode", MODES)
def test_forked_sleeper_dies_with_its_vector_and_a_pipe_reader_is_not_kept(hostile, tmp_path, mode):
    if not _mode_works(mode):
        pytest.skip(f"this machine cannot make the {mode} mode")
    proj, path = hostile
    plan = _plan_with(proj, path, {"fork_sleeper", "fd_forger"}, tmp_path)
    before = _ours()
    start = time.monotonic()
    # stdout is a pipe read to its end: a surviving sleeper would hold it 90 s
    proc = subprocess.run(_cli(plan, "--results", str(tmp_path / "r.json"), "--timeout", "2"),
                          cwd=str(proj), env=_env(mode), capture_output=True, text=True,
                          timeout=60)
    took = time.monotonic() - start
    assert "FAIL broken_hostile::fork_sleeper[n10] (?): timed out after 2 s (core 0 was running)" \
        in proc.stdout, proc.stdout + proc.stderr
    assert "PASS broken_hostile::fd_forger[n10]" in proc.stdout
    assert took < 20, took
    assert _left_over(before) == {}


def _start_spinning(hostile, tmp_path, mode=None):
    proj, path = hostile
    plan = _plan_with(proj, path, {"fork_sleeper"}, tmp_path)
    before = _ours()
    proc = subprocess.Popen(_cli(plan, "--results", str(tmp_path / "r.json"), "--timeout", "60"),
                            cwd=str(proj), env=_env(mode), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while not {"gpsimd-spinner", "gpsimd-sleeper"} <= set(_ours().values()):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the kernel never started"
        time.sleep(0.02)
    return proc, before


@pytest.mark.parametrize("mode", ("pidns", "userns"))
def test_kill_9_of_the_emulator_leaves_nothing_spinning(hostile, tmp_path, mode):
    """With a PID namespace (root: pidns; else userns), SIGKILL of the
    emulator ends everything: each process dies with its parent and the
    namespace with the zygote, its PID 1. (In process-group mode a child
    that left the vector's group would survive a SIGKILL of the whole
    tree; there the subreapers sweep it whenever they get to run.)"""
    if not _mode_works(mode):
        pytest.skip(f"this machine cannot make the {mode} mode")
    proc, before = _start_spinning(hostile, tmp_path, mode)
    proc.kill()
    proc.communicate(timeout=10)
    assert _left_over(before) == {}


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_sigterm_and_sigint_stop_the_run_at_once(hostile, tmp_path, sig):
    proc, before = _start_spinning(hostile, tmp_path)
    start = time.monotonic()
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=10)
    took = time.monotonic() - start
    print(f"{signal.Signals(sig).name}: the emulator ended {took * 1000:.0f} ms after the signal")
    assert took < 5.0, took
    assert proc.returncode == -sig, (proc.returncode, out, err)
    assert "Traceback" not in err
    assert _left_over(before) == {}
    assert not (tmp_path / "r.json").exists()


def _memory_cgroups_of(pids) -> list:
    """The memory cgroup folders the zygotes ``pids`` made
    (``gpsimd-emu-<pid>`` below each one's own memory cgroup, cgroup v1
    or v2) that exist now."""
    found = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/cgroup") as f:
                lines = f.read().splitlines()
        except OSError:
            continue
        for line in lines:
            _, controllers, path = line.split(":", 2)
            base = ("/sys/fs/cgroup/memory" if "memory" in controllers.split(",") else
                    "/sys/fs/cgroup" if controllers == "" else None)
            folder = f"{base}{path.rstrip('/')}/gpsimd-emu-{pid}" if base else None
            if folder and os.path.isdir(folder):
                found.append(folder)
    return found


@pytest.mark.parametrize("mode", ("pidns", "userns", "pgroup"))
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_a_run_stopped_while_a_vector_runs_leaves_no_memory_cgroup(hostile, tmp_path, mode, sig):
    """The zygote's memory cgroup is removed when the run is stopped as
    well as when it ends: SIGTERM to the run (its supervising process then
    ends the worker and the zygote), and SIGKILL of the worker alone (the
    zygote sees its parent die). The relay outside the namespace (in
    ``pgroup`` mode, outside the zygote) outlives the zygote to remove it;
    a SIGKILL of the relay would leave it for the next run to find."""
    if not _mode_works(mode):
        pytest.skip(f"this machine cannot make the {mode} mode")
    proc, before = _start_spinning(hostile, tmp_path, mode)
    try:
        zygotes = [p for p, n in _ours().items() if n == "gpsimd-zygote" and p not in before]
        made = _memory_cgroups_of(zygotes)
        if not made:
            pytest.skip("no memory cgroup can be made here")
        if sig == signal.SIGTERM:
            proc.send_signal(sig)
        else:                       # (the worker: the zygote's parent)
            worker = {int(open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()[1])
                      for p in zygotes} - set(zygotes)
            assert len(worker) == 1, worker
            os.kill(worker.pop(), sig)
        proc.communicate(timeout=30)
        assert _left_over(before) == {}
        assert [f for f in made if os.path.isdir(f)] == []
    finally:
        proc.kill()
        proc.wait()


def test_memory_limit_is_a_named_fault(hostile, tmp_path):
    proj, path = hostile
    plan = _plan_with(proj, path, {"memory_hog", "fd_forger"}, tmp_path)
    proc = subprocess.run(_cli(plan, "--results", str(tmp_path / "r.json"), "--memory", "256M",
                               "--timeout", "20"),
                          cwd=str(proj), env=_env(), capture_output=True, text=True, timeout=120)
    lines = proc.stdout.splitlines()
    assert "FAIL broken_hostile::memory_hog[n10] (?): core 0 exceeded the 256 MiB memory limit" \
        in lines, proc.stdout + proc.stderr
    assert "PASS broken_hostile::fd_forger[n10] (?): max_abs_err 0 over 10 elements" in lines


def test_device_image_and_inputs_are_checked_before_allocation(hostile, tmp_path):
    proj, path = hostile
    plan = _plan_with(proj, path, {"fd_forger"}, tmp_path,
                      inputs={"x": {"kind": "tensor", "dtype": "float32", "shape": [40000000],
                                    "random": {"seed": 1, "distribution": "normal"}}})
    proc = subprocess.run(_cli(plan, "--results", str(tmp_path / "r.json"), "--memory", "64M"),
                          cwd=str(proj), env=_env(), capture_output=True, text=True, timeout=60)
    # (40M float32: 152.6 MiB declared, and 20 bytes an element while drawn)
    assert ("FAIL broken_hostile::fd_forger[n10] (?): the vector's inputs need 915.5 MiB (while "
            "they are made: a random input is drawn as 64-bit numbers first), more than the "
            "64 MiB memory limit (--memory, EMU_MEMORY)") in proc.stdout.splitlines(), \
        proc.stdout + proc.stderr
    # an output the reference makes big: the image (3 runs: the second call
    # has an output copy and core memories of its own) is over the limit
    # (the input from a .npy: nothing drawn; the later runs' copies have a
    # 4 KiB guard zone, the first run's 64 KiB)
    np.save(tmp_path / "x.npy", np.ones(4000000, np.float32))
    plan = _plan_with(proj, path, {"fd_forger"}, tmp_path,
                      inputs={"x": {"kind": "tensor", "dtype": "float32", "shape": [4000000],
                                    "npy": str(tmp_path / "x.npy")}})
    proc = subprocess.run(_cli(plan, "--results", str(tmp_path / "r.json"), "--memory", "64M"),
                          cwd=str(proj), env=_env(), capture_output=True, text=True, timeout=60)
    assert ("FAIL broken_hostile::fd_forger[n10] (?): the vector's device image needs 82.7 MiB "
            "(inputs 30.5 MiB, 3 output copies of 15.3 MiB, per-core memories 6.3 MiB), more "
            "than the 64 MiB memory limit (--memory, EMU_MEMORY)") in proc.stdout.splitlines(), \
        proc.stdout + proc.stderr


@pytest.fixture
def full_disk(small_disk):
    """A folder on a 64 KiB tmpfs filled to the last byte (root only)."""
    mnt = small_disk("64k")
    fill(mnt)
    return mnt


def test_disk_full_names_path_and_errno_and_leaves_no_temporary_file(hostile, tmp_path, full_disk):
    proj, path = hostile
    plan = _plan_with(proj, path, {"fd_forger"}, tmp_path)
    out = full_disk / "test-results.json"
    proc = subprocess.run(_cli(plan, "--results", str(out), "--failed-results",
                               str(full_disk / "failed.json")),
                          cwd=str(proj), env=_env(), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == (
        f"gpsimd_emu: cannot write {out}: No space left on device (errno 28)")
    assert "wrote no results" not in proc.stderr and "Traceback" not in proc.stderr
    assert sorted(os.listdir(full_disk)) == ["filler"]


SHM_HOG = r"""
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <torch/torch.h>
// Shared memory, which RLIMIT_DATA does not count: only the vector's memory
// cgroup stops it. Gives up by itself after 2 GiB (the test then fails).
torch::Tensor shm_hog(const torch::Tensor& x) {
    for (int i = 0; i < 32; ++i) {
        void* p = mmap(nullptr, 64u << 20, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) abort();
        memset(p, 1, 64u << 20);
    }
    return torch::mul(x, 2.0f);
}
"""


def test_memory_cgroup_bounds_what_rlimits_cannot(built_project, tmp_path, monkeypatch):
    """In a PID namespace the zygote joins the cgroup; without one (pgroup)
    each vector's leader does: both are bounded, from one build."""
    from gpsimd_emu.session import LibrarySession, RunOptions
    from gpsimd_device.plan import TestPlan
    proj = copy_built(built_project[0], tmp_path / "proj")
    (proj / "probe").mkdir(exist_ok=True)
    (proj / "probe" / "shm_hog.cpp").write_text(SHM_HOG)
    manifest = {"version": 1, "libraries": [{
        "name": "cg_hog", "sources": ["probe/shm_hog.cpp"],
        "ops": [{"schema": "t::shm_hog(Tensor x) -> Tensor", "vectors": [{
            "name": "n10", "inputs": {"x": {"dtype": "float32", "shape": [10], "values": [1] * 10}},
            "expected": {"values": [2] * 10}}]}]}]}
    (proj / "cg.yaml").write_text(json.dumps(manifest))
    out = "build/host/cg_hog"
    proc = run_scons(proj, "MANIFEST=cg.yaml", f"{out}/testplan.json", f"{out}/cg_hog.packed.so",
                     ZYGOTE)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    plan = TestPlan.load(str(proj / out / "testplan.json"))
    for mode in ("pidns", "pgroup"):
        monkeypatch.setenv("GPSIMD_EMU_CONTAIN", mode)
        with LibrarySession(plan, root=str(proj), options=RunOptions(
                memory=256 << 20, zygote=str(proj / ZYGOTE))) as s:
            r = s.run_vector("shm_hog", "n10")
            if not s.ready()["cgroup"]:
                pytest.skip("no memory cgroup can be made here")
            assert s.ready()["mode"] == mode
        assert (r.status, r.message) == ("fail", "core 0 exceeded the 256 MiB memory limit"), mode


def test_sigterm_to_scons_alone_ends_its_test_run(hostile):
    """``kill -TERM`` of scons only (a CI runner cancelling a job): scons
    passes it to the running test command, not only to the ``sh -c`` in
    front of it (dash forks the command and dies of SIGTERM alone), so the
    build stops at once and no process of the test run is left behind
    (before, the emulator ran on to its vector's 60 s time limit)."""
    proj, _ = hostile
    before = _ours()
    proc = subprocess.Popen(
        [sys.executable, "-m", "SCons", "-Q", "MANIFEST=kernels/broken/ops.yaml",
         "EMU_TIMEOUT=60", "EMU_MEMORY=256M", f"test-{LIB}"],
        cwd=str(proj), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while "gpsimd-spinner" not in {n for p, n in _ours().items() if p not in before}:
            assert proc.poll() is None, proc.communicate()[0]
            assert time.monotonic() < deadline, "the kernel never started"
            time.sleep(0.02)
        start = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        out = proc.communicate(timeout=30)[0]
        took = time.monotonic() - start
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    print(f"scons ended {took * 1000:.0f} ms after SIGTERM")
    assert took < 5.0, (took, out)
    assert proc.returncode != 0
    assert "Build interrupted" in out, out
    assert f"{LIB}: not run" in out, out
    assert _left_over(before, session=proc.pid) == {}


def test_a_terminal_that_goes_away_ends_the_build_and_its_test_run(hostile):
    """The terminal scons runs in goes away (a window closed, an ssh
    connection lost) while a test runs: its SIGHUP ends the run, and the
    errors SCons then writes to that terminal (EIO) do not hang the build
    (they did: the job thread that wrote one died, and scons waited for it
    for ever, holding the build folder's lock)."""
    import pty
    import select
    proj, _ = hostile
    before = _ours()
    pid, master = pty.fork()             # (scons leads a session whose terminal is ours)
    if pid == 0:
        os.chdir(str(proj))
        os.execv(sys.executable, [sys.executable, "-m", "SCons", "-Q",
                                  "MANIFEST=kernels/broken/ops.yaml", "EMU_TIMEOUT=60",
                                  "EMU_MEMORY=256M", f"test-{LIB}"])
    ended = os.pidfd_open(pid)
    try:
        deadline = time.monotonic() + 60
        while "gpsimd-spinner" not in {n for p, n in _ours().items() if p not in before}:
            assert not select.select([ended], [], [], 0)[0], "scons ended before the kernel ran"
            assert time.monotonic() < deadline, "the kernel never started"
            while select.select([master], [], [], 0.02)[0]:   # (the terminal never fills)
                if not os.read(master, 65536):
                    break
        os.close(master)
        master = None
        start = time.monotonic()
        assert select.select([ended], [], [], 30)[0], "scons hung once its terminal was gone"
        took = time.monotonic() - start
    finally:
        if master is not None:
            os.close(master)
        if not select.select([ended], [], [], 0)[0]:
            os.killpg(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        os.close(ended)
    print(f"scons ended {took * 1000:.0f} ms after its terminal went away")
    assert _left_over(before, session=pid) == {}


def _ancestors(pid):
    """Names of ``pid``'s ancestors, nearest first."""
    names = []
    while pid > 1:
        try:
            with open(f"/proc/{pid}/stat") as f:
                pid = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{pid}/comm") as f:
                names.append(f.read().strip())
        except (OSError, ValueError, IndexError):
            break
    return names


@pytest.mark.parametrize("server", ["1", "0"])
def test_kill_9_of_scons_alone_ends_its_test_run(hostile, server):
    """``kill -9`` of scons only (nothing can be forwarded): with the
    emulator server (the default) the server sees scons end (its pidfd)
    and ends the run, so nothing is left; the test run was the server's
    (its processes descend from ``gpsimd-run`` under ``gpsimd-server``).
    Without it (EMU_SERVER=0), the orphaned run goes on alone: this test
    records that it does end, at its time limit (EMU_TIMEOUT=3)."""
    proj, _ = hostile
    before = _ours()
    proc = subprocess.Popen(
        [sys.executable, "-m", "SCons", "-Q", "MANIFEST=kernels/broken/ops.yaml",
         "EMU_TIMEOUT=3" if server == "0" else "EMU_TIMEOUT=60", "EMU_MEMORY=256M",
         f"EMU_SERVER={server}", f"test-{LIB}"],
        cwd=str(proj), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            spinning = [p for p, n in _ours().items() if n == "gpsimd-spinner" and p not in before]
            if spinning:
                break
            assert proc.poll() is None, proc.communicate()[0]
            assert time.monotonic() < deadline, "the kernel never started"
            time.sleep(0.02)
        chain = _ancestors(spinning[0])
        if server == "1":
            assert "gpsimd-server" in chain and chain[chain.index("gpsimd-server") - 1] == \
                "gpsimd-run", chain
        else:
            assert "gpsimd-server" not in chain and "gpsimd-run" not in chain, chain
        start = time.monotonic()
        proc.kill()
        proc.communicate(timeout=30)
        left = _left_over(before, wait=5.0 if server == "1" else 30.0,
                          session=proc.pid)
        took = time.monotonic() - start
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    print(f"EMU_SERVER={server}: the test run's last process ended {took * 1000:.0f} ms "
          f"after scons was killed")
    assert left == {}
    if server == "1":
        assert took < 5.0, took


#: What terminal_forger writes (hostile.cpp), as the emulator prints it.
FAKE = ["\\x1b[1A\\x1b[2J\\rPASS broken_hostile::terminal_forger[n10]: max_abs_err 0",
        "total: 1 passed, 0 failed", "\\x1b[8m\\x1b[30;40m"]


def test_a_kernels_escape_sequences_are_printed_visible(hostile, tmp_path):
    """What a kernel writes to stderr and to printf, and its exception's
    text in the FAIL line, are printed with their control characters as
    escapes, each line after its prefix: on a terminal they move no cursor,
    clear nothing, overwrite no line and hide nothing."""
    proj, path = hostile
    plan = _plan_with(proj, path, {"terminal_forger"}, tmp_path)
    proc = subprocess.run(_cli(plan, "--results", str(tmp_path / "r.json"), "--timeout", "20"),
                          cwd=str(proj), env=_env(), capture_output=True, timeout=60)
    both = proc.stdout + proc.stderr
    assert proc.returncode == 1, both
    assert b"\x1b" not in both and b"\r" not in both, both
    out, err = proc.stdout.decode(), proc.stderr.decode()
    assert out.splitlines() == [
        "FAIL broken_hostile::terminal_forger[n10] (?): core 0: fault CXX_EXCEPTION in op "
        "terminal_forger: C++ exception: " + "\\n".join(FAKE) + "; elements never written: [0, 10)",
        "broken_hostile: 0 passed, 1 failed"], out + err
    for stream in ("core 0", "core 0 stderr"):
        prefix = f"[broken_hostile::terminal_forger[n10] {stream}] "
        assert [line for line in err.splitlines() if line.startswith(prefix)] == [
            prefix + line for line in FAKE], err
    # the results keep what the kernel wrote, as it wrote it
    (vec,) = json.loads((tmp_path / "r.failed.json" if (tmp_path / "r.failed.json").exists()
                         else tmp_path / "r.json").read_text())["vectors"]
    assert "\x1b[1A\x1b[2J\rPASS" in vec["message"]


@pytest.mark.parametrize("expected,line", [
    (None, "FAIL broken_hostile::halve_int[n3] (?): expected value 0.9 at [0] is not an int32 (the "
           "output's dtype), from the vector's expected values (and 2 more)"),
    ({"reference": {"file": "kernels/broken/reference.py", "module": None, "function": "halve_off"}},
     "FAIL broken_hostile::halve_int[n3] (?): expected value 0.95 at [0] is not an int32 (the "
     "output's dtype), from the reference kernels/broken/reference.py:halve_off (and 2 more)"),
    ({"values": [0, 1, 2]}, "PASS broken_hostile::halve_int[n3] (?): max_abs_err 0 over 3 elements"),
])
def test_expected_values_an_int32_output_cannot_hold_fail_the_vector(hostile, tmp_path, expected,
                                                                    line):
    """The reviewer's op: int32 x / 2 returns [0, 1, 2] for [1, 3, 5]; an
    expectation of [0.9, 1.9, 2.9], inline or from a float64 reference, is
    no longer cast to that and passed (the control: [0, 1, 2] passes)."""
    proj, path = hostile
    changes = {} if expected is None else {"expected": expected}
    plan = _plan_with(proj, path, {"halve_int"}, tmp_path, **changes)
    proc = subprocess.run(_cli(plan, "--results", str(tmp_path / "r.json"), "--timeout", "20"),
                          cwd=str(proj), env=_env(), capture_output=True, text=True, timeout=60)
    assert proc.stdout.splitlines()[0] == line, proc.stdout + proc.stderr
    assert proc.returncode == (0 if line.startswith("PASS") else 1)
