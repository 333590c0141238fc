"""The native leader (``gpsimd_emu.native``, ``leader.c``) against the
Python leader (``gpsimd_emu.launch``, the reference), on every library of
the shipped and the broken collections: the same results, and, with the
cores one after another, the same control-block records (every pass,
slot and process record but pids and times). Spread over processes the
results stay the same (which process made which core is a race there,
for both). The build compiles the library and every test command names
it; a library that cannot be used falls back to the Python leader with a
warning."""
import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT
from test_emu_checks import LIBS, broken  # noqa: F401  (the fixture)

from gpsimd_device.plan import TestPlan
from gpsimd_emu import native, session as session_mod
from gpsimd_emu.session import LibrarySession, RunOptions

LEADER = "build/host/emu/libgpsimd_leader.so"
SHIPPED = ("spmd", "elementwise", "factories", "streams", "scalar_args")


def _run(proj, lib, leader, **options):
    """(results JSON, [record per vector]) of a run_all of ``lib``."""
    records = []
    outcome = session_mod.LibrarySession._outcome

    def capture(self, p):
        o = outcome(self, p)
        rec = json.loads(json.dumps(getattr(o, "record", None)))
        if rec:
            for job in rec["jobs"]:
                del job["pid"]
            for row in [rec["passes"]] + rec["slots"]:
                for entry in row:
                    del entry["t_start"], entry["t_end"]
        records.append((p.op.name, p.vector.name, rec, o.wait_status, o.timed_out,
                        getattr(o, "record_error", None)))
        return o
    plan = TestPlan.load(str(_plan(proj, lib)))
    session_mod.LibrarySession._outcome = capture
    try:
        opts = RunOptions(timeout=2, memory=256 << 20,
                          leader=str(proj / LEADER) if leader else None, **options)
        with LibrarySession(plan, root=str(proj), options=opts) as s:
            results = s.run_all().to_json()
            used = s.zygote.ready(5)["leader"] if s.zygote else None
    finally:
        session_mod.LibrarySession._outcome = outcome
    assert used in (None, "native" if leader else "python")
    return results, records


def _plan(proj, lib):
    """A library's plan (with shape sources: the one its shape functions filled)."""
    shaped = proj / f"build/host/{lib}/testplan.shaped.json"
    return shaped if shaped.exists() else proj / f"build/host/{lib}/testplan.json"


@pytest.fixture(scope="module")
def proj(broken):  # noqa: F811
    proj, _, _ = broken
    assert (proj / LEADER).is_file()       # built with the tests
    return proj


@pytest.mark.parametrize("checks", [True, False], ids=["checks", "no-checks"])
@pytest.mark.parametrize("lib", LIBS + SHIPPED)
def test_one_after_another_same_results_and_records(proj, lib, checks):
    py = _run(proj, lib, False, checks=checks, parallel=1)
    c = _run(proj, lib, True, checks=checks, parallel=1)
    assert c[0] == py[0]
    assert c[1] == py[1]
    assert len(c[1]) == sum(1 for v in py[0]["vectors"])


@pytest.mark.parametrize("checks", [True, False], ids=["checks", "no-checks"])
@pytest.mark.parametrize("lib", ["broken_spmd", "broken_race", "broken_crash", "spmd"])
def test_spread_over_processes_same_results(proj, lib, checks):
    if lib == "broken_race" and not checks:
        pytest.skip("racy cores on one shared output: any result, in either leader")
    spread = dict(parallel=8, spread_after=0.0, checks=checks)
    py, _ = _run(proj, lib, False, **spread)
    c, records = _run(proj, lib, True, **spread)
    assert c == py
    if lib == "broken_crash":      # single-core, and each vector stops after its first run
        return
    # the helpers did run: some core of a multicore run was made by another process
    assert any(s["job"] != 0 for _, _, rec, *_ in records if rec
               for row in rec["slots"] for s in row)


def test_an_unusable_library_falls_back_with_a_warning(proj, tmp_path):
    bad = tmp_path / "libnot.so"
    bad.write_bytes(b"not an ELF object")
    env = dict(os.environ, PYTHONPATH=str(ROOT / "runtime_model"))
    proc = subprocess.run([sys.executable, "-m", "gpsimd_emu", "run",
                           str(_plan(proj, "spmd")), "--results", str(tmp_path / "r.json"),
                           "--leader", str(bad), "--quiet"],
                          cwd=str(proj), env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    warning = [l for l in proc.stderr.splitlines() if "warning" in l]
    assert len(warning) == 1
    assert warning[0].startswith(f"gpsimd_emu: warning: {bad}: cannot load the native leader: ")
    assert warning[0].endswith("; the vectors run with the Python leader")
    assert json.loads((tmp_path / "r.json").read_text())["passed"] == 16


@pytest.mark.parametrize("lib", LIBS + ("spmd", "streams"))
def test_the_native_zygote_gives_the_python_zygotes_results_and_records(proj, lib,
                                                                        monkeypatch):
    """With the native leader the zygote becomes the native zygote
    (``native_zygote.c``: the leader library run as a program); it gives
    the results and records of the Python zygote forking the same leader
    (``$GPSIMD_EMU_NATIVE_ZYGOTE=0``), faults, crashes, races and memory
    limits included."""
    c = _run(proj, lib, True, checks=True, parallel=1)
    monkeypatch.setenv(native.ZYGOTE_ENV, "0")
    py = _run(proj, lib, True, checks=True, parallel=1)
    assert c == py
    assert len(c[1]) == len(c[0]["vectors"])


def _zygote_of(s):
    """(the program, whether libpython is mapped, the name) of a session's zygote."""
    pid = None
    for p in [s.zygote.pid] + sorted(_descendants_of(s.zygote.pid)):
        if _comm(p) == "gpsimd-zygote":
            pid = p
    with open(f"/proc/{pid}/maps") as f:
        maps = f.read()
    return os.readlink(f"/proc/{pid}/exe"), "libpython" in maps or "/python3" in maps, _comm(pid)


def _comm(pid):
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return None


def _ppid(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError):
        return None


def _descendants_of(root):
    out, todo = set(), [root]
    while todo:
        parent = todo.pop()
        for p in os.listdir("/proc"):
            if p.isdigit() and _ppid(int(p)) == parent and int(p) not in out:
                out.add(int(p))
                todo.append(int(p))
    return out


def test_the_native_zygote_holds_no_interpreter_and_refuses_what_it_cannot_read(proj,
                                                                              monkeypatch):
    """The native zygote is the dynamic loader's program (no Python mapped,
    so a vector's fork copies the objects' pages alone); a message it
    cannot read is answered with an error, the vector fails with it, and
    the next vector runs. With ``$GPSIMD_EMU_NATIVE_ZYGOTE=0`` the zygote
    stays Python and reads the same messages."""
    import socket
    plan = TestPlan.load(str(_plan(proj, "spmd")))
    op, vector = plan.ops[0], plan.ops[0].vectors[0]
    for env, program in (("1", native.dynamic_loader(sys.executable)), ("0", None)):
        monkeypatch.setenv(native.ZYGOTE_ENV, env)
        opts = RunOptions(timeout=2, leader=str(proj / LEADER))
        with LibrarySession(plan, root=str(proj), options=opts) as s:
            assert s.run_vector(op, vector).status == "pass"
            exe, python, name = _zygote_of(s)
            assert name == "gpsimd-zygote"
            if program:
                assert os.path.realpath(exe) == os.path.realpath(program) and not python
            else:
                assert os.path.realpath(exe) == os.path.realpath(sys.executable) and python
            r, w = os.pipe()
            socket.send_fds(s.zygote.sock, [b"\x00" * 40], [r])
            os.close(r)
            os.close(w)
            got = s.zygote.receive(10)
            assert got == {"error": "a request the native zygote cannot read"} if program \
                else got == {"error": "a request the zygote cannot read"}
            assert s.run_vector(op, vector).status == "pass"
